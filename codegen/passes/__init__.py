"""The passes over the statement IR: fusion, hoisting, halving, slopes, fresh returns, forward mode."""
