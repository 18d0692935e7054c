"""The last section of a zoo document, "Against the source": each quantity as the model's source writes it, in
the source's notation, then where this derivation agrees, where it differs and why (a source's formula that is
not a valid product is said to be one, so that a student holding the source knows which to trust)."""

from bptt.derive.models import load
from bptt.documents.equation import Equation, Section, displays

# {zoo model: (the section's opening, ((the sentence before, lhs, rhs, what this derivation says of it), ...))}.
# The formulas are the sources', in their notation (the seeds' texts); each fits one line of the page.
SOURCES = {
    "birnn": (
        "Schuster and Paliwal (1997) describe the bidirectional network's training in words: forward, the forward "
        "states from $t = 1$ to $T$ and the backward states from $T$ to $1$, then the outputs; backward, the "
        "outputs' gradients, then the forward states' from $T$ to $1$ and the backward states' from $1$ to $T$, as "
        "above. PyTorch documents torch.nn.RNN's forward equation only and computes the gradients by automatic "
        "differentiation.",
        (
            (
                r"PyTorch's state $h_t$ of each direction, the reverse direction reading the sequence reversed:",
                r"h_t",
                r"\tanh(x_t W_{ih}^\top + b_{ih} + h_{t-1} W_{hh}^\top + b_{hh})",
                r"The same as $\mathbf{h}_{\textrm{f},t}$ above, with $\mathbf{W}_\textrm{f} = W_{ih}$, "
                r"$\mathbf{U}_\textrm{f} = W_{hh}$, $\mathbf{b}_\textrm{f} = b_{ih} + b_{hh}$ and rows for columns; "
                r"in the reverse direction its $h_{t-1}$ is $\mathbf{h}_{\textrm{b},t+1}$ here.",
            ),
        ),
    ),
    "linear": (
        "Dive into Deep Learning (section 9.7; Chinese edition 6.6) derives this model's gradients with the loss "
        "function left general, and sketches truncation on a scalar model.",
        (
            (
                r"It writes the state's gradient in closed form, with the loss function named $\ell$ (the English "
                r"edition $l$) and $T$ steps:",
                r"\frac{\partial L}{\partial \mathbf{h}_t}",
                r"\sum_{i=t}^{T} \left(\mathbf{W}_{hh}^\top\right)^{T-i} \mathbf{W}_{qh}^\top "
                r"\frac{\partial L}{\partial \mathbf{o}_{T+t-i}}",
                r"The same as the closed form above with $i = T + t - j$. Here $l$ names the loss function and "
                r"$\ell_t$ its value at step $t$; its gradients of $\mathbf{W}_{hx}$, $\mathbf{W}_{hh}$ and "
                r"$\mathbf{W}_{qh}$ are those above.",
            ),
            (
                r"On a scalar model $h_t = f(x_t, h_{t-1}, w_h)$, with $f_t$ for $f(x_t, h_{t-1}, w_h)$, it "
                r"carries the derivative of the state forward:",
                r"\frac{\partial h_t}{\partial w_h}",
                r"\frac{\partial f_t}{\partial w_h} + \sum_{i=1}^{t-1} \frac{\partial f_t}{\partial h_{t-1}} "
                r"\cdots \frac{\partial f_{i+1}}{\partial h_{i}} \, \frac{\partial f_i}{\partial w_h}",
                r"and truncates this sum after $\tau$ steps, at $\partial h_{t-\tau} / \partial w_h$. That is the "
                r"window truncation above, computed forward instead of backward: both keep the loss of step $j$ "
                r"and the parameter's use at step $i$ exactly when $j - i \le \tau$. The book's code detaches the "
                r"state between subsequences instead, which is the truncation in chunks above: it cuts at fixed "
                r"steps, so a loss near a chunk's start keeps fewer steps than $\tau$. Forward mode above "
                r"carries the whole sum, untruncated.",
            ),
        ),
    ),
    "elman": (
        "Goodfellow, Bengio and Courville (section 10.2.2) derive this model's gradients with $\\mathbf{o}$ for the "
        "scores and $\\hat{\\mathbf{y}}$ for their softmax; a set of study notes on that section copies them "
        "with one change.",
        (
            (
                r"The notes write the recursion of the hidden state's gradient $\nabla_{\mathbf{h}^{(t)}} L$ as:",
                r"\nabla_{\mathbf{h}^{(t)}} L",
                r"\mathbf{W}^\top \left(\nabla_{\mathbf{h}^{(t+1)}} L\right) "
                r"\operatorname{diag}\left(1 - \left(\mathbf{h}^{(t+1)}\right)^2\right) "
                r"+ \mathbf{V}^\top \nabla_{\mathbf{o}^{(t)}} L",
                r"That product is not defined: $\mathbf{W}^\top \nabla_{\mathbf{h}^{(t+1)}} L$ is a column of $h$ "
                r"numbers, and a column cannot multiply an $h \times h$ matrix from the left. The book puts the "
                r"diagonal first, $\mathbf{W}^\top \operatorname{diag}(1 - (\mathbf{h}^{(t+1)})^2) "
                r"\nabla_{\mathbf{h}^{(t+1)}} L$, which is the recursion above: $\mathbf{W}^\top$ times "
                r"$\partial L / \partial \mathbf{a}_{t+1} = "
                r"\operatorname{diag}(\mathbf{1} - \mathbf{h}_{t+1}^{\odot 2}) \, "
                r"\partial L / \partial \mathbf{h}_{t+1}$, "
                r"the slope at step $t+1$ applied before $\mathbf{W}^\top$.",
            ),
            (
                r"Both write the gradient of the scores $\mathbf{o}^{(t)}$ entry by entry, with "
                r"$\mathbf{1}_{i = y^{(t)}}$ one where $i$ is the label and zero elsewhere:",
                r"\left(\nabla_{\mathbf{o}^{(t)}} L\right)_i",
                r"\hat{y}^{(t)}_i - \mathbf{1}_{i = y^{(t)}}",
                r"The same as $\partial L / \partial \mathbf{s}_t$ above, $\mathbf{s}_t$ being the book's "
                r"$\mathbf{o}^{(t)}$ and $\mathbf{o}_t$ its $\hat{\mathbf{y}}^{(t)}$.",
            ),
            (
                r"And the gradient of the recurrent weights $\mathbf{W}$, a sum over the steps:",
                r"\nabla_{\mathbf{W}} L",
                r"\sum_{t} \operatorname{diag}\left(1 - \left(\mathbf{h}^{(t)}\right)^2\right) "
                r"\left(\nabla_{\mathbf{h}^{(t)}} L\right) \mathbf{h}^{(t-1)\top}",
                r"The same as $\partial L / \partial \mathbf{W}$ above, with $\partial L / \partial \mathbf{a}_t$ "
                r"named.",
            ),
        ),
    ),
    "elman-onehot": (
        "The WildML tutorial (part 3) derives the gradients of one step's loss $E_3$, with $\\hat{y}_3$ the "
        "softmax of the scores $z_3 = V s_3$ and $s_t$ the state, as here.",
        (
            (
                r"It writes the gradient of the output weights $V$ as an outer product:",
                r"\frac{\partial E_3}{\partial V}",
                r"(\hat{y}_3 - y_3) \otimes s_3",
                r"The $t = 3$ term of $\partial L / \partial \mathbf{V}$ above: "
                r"$\partial L / \partial \mathbf{z}_3 \, \mathbf{s}_3^\top$, with $y_3$ one-hot.",
            ),
            (
                r"And it carries the state's derivative by $W$ forward, with $1 - s_t^2$ the slope of $\tanh$:",
                r"\frac{\partial s_t}{\partial W}",
                r"(1 - s_t^2) \left(s_{t-1} + W \frac{\partial s_{t-1}}{\partial W}\right)",
                r"A sketch on scalars: for a matrix $W$ the derivative holds $h^3$ numbers, and $s_{t-1}$ cannot be "
                r"added to it. Along a direction $\dot{\mathbf{W}}$ it is the tangent of forward mode above, "
                r"$\dot{\mathbf{s}}_t = \operatorname{diag}(\mathbf{1} - \mathbf{s}_t^{\odot 2}) "
                r"(\dot{\mathbf{W}} \mathbf{s}_{t-1} + \mathbf{W} \dot{\mathbf{s}}_{t-1})$.",
            ),
        ),
    ),
    "jordan": (
        "Goodfellow, Bengio and Courville (section 10.2.1) draw this network and train it with teacher forcing; "
        "they give no formula for its gradients, only what teacher forcing does to them.",
        (
            (
                r"In the book's notation, under teacher forcing the hidden layer of step $t$ reads the true output "
                r"of the step before, "
                r"$\mathbf{y}^{(t-1)}$, not the model's $\mathbf{o}^{(t-1)}$:",
                r"\mathbf{h}^{(t)}",
                r"\tanh\left(\mathbf{b} + \mathbf{R} \, \mathbf{y}^{(t-1)} + \mathbf{U} \mathbf{x}^{(t)}\right)",
                r"The book's $\mathbf{y}^{(t-1)}$ is $\operatorname{onehot}(y_{t-1})$ here. As the book says, the "
                r"steps decouple: each gradient above is a plain sum over $t$, and no gradient flows back through "
                r"time.",
            ),
        ),
    ),
    "elman-jordan": (
        "Goodfellow, Bengio and Courville (section 10.2.1) note that teacher forcing removes only the recurrence "
        "through the outputs: a network that also has hidden-to-hidden connections still needs BPTT.",
        (
            (
                r"In the book's notation, the hidden layer of step $t$ reads both the state before and the true "
                r"output before:",
                r"\mathbf{h}^{(t)}",
                r"\tanh\left(\mathbf{b} + \mathbf{W} \mathbf{h}^{(t-1)} + \mathbf{R} \, \mathbf{y}^{(t-1)} "
                r"+ \mathbf{U} \mathbf{x}^{(t)}\right)",
                r"So the derivation runs BPTT through $\mathbf{h}_t$ alone, as the book says, and cuts the term "
                r"through $\mathbf{o}_t$, which is data ($\operatorname{onehot}(y_t)$) in training.",
            ),
        ),
    ),
    "gru": (
        "PyTorch documents torch.nn.GRU's forward equations only; it computes the gradients by automatic "
        "differentiation. Cho et al. (2014) apply the reset gate "
        "before the recurrent product.",
        (
            (
                r"PyTorch's candidate state, the reset gate $r_t$ applied after the recurrent product:",
                r"n_t",
                r"\tanh\left(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})\right)",
                r"The same as $\mathbf{n}_t$ above, with $\mathbf{m}_t = \mathbf{W}_\textrm{hn} \mathbf{h}_{t-1} "
                r"+ \mathbf{b}_\textrm{hn}$ named.",
            ),
            (
                r"Cho et al.'s candidate state, with $U$ their recurrent weights:",
                r"\tilde{h}_t",
                r"\tanh\left(W x_t + U \left(r_t \odot h_{t-1}\right)\right)",
                r"A different cell: there $\partial L / \partial \mathbf{r}_t = \operatorname{diag}(\mathbf{h}_{t-1}) "
                r"\, U^\top \partial L / \partial \bar{\mathbf{n}}_t$, here it is "
                r"$\operatorname{diag}(\mathbf{m}_t) \, \partial L / \partial \bar{\mathbf{n}}_t$. "
                r"Both write the new state as the gate $\mathbf{z}_t$'s "
                r"mix of the state before and the candidate.",
            ),
        ),
    ),
    "lstm": (
        "PyTorch documents torch.nn.LSTM's forward equations only and computes the gradients by automatic "
        "differentiation.",
        (
            (
                r"Its cell $c_t$ and hidden state $h_t$:",
                r"c_t",
                r"f_t \odot c_{t-1} + i_t \odot g_t, \qquad h_t = o_t \odot \tanh(c_t)",
                r"The same as above, each gate reading two biases, $\mathbf{b}_\textrm{i}$ and "
                r"$\mathbf{b}_\textrm{h}$, as PyTorch stores them: only their sum is learned.",
            ),
        ),
    ),
    "lstm-peephole": (
        "Greff et al. (2017, appendix) give the backward pass of this cell, with $\\delta$ for a gradient of the "
        "loss, $\\mathbf{y}_t$ for the block's output ($\\mathbf{h}_t$ here), $\\Delta_t$ for the gradient "
        "arriving from above ($\\mathbf{V}^\\top \\partial L / \\partial \\mathbf{s}_t$ here) and $h$ for the "
        "output's $\\tanh$.",
        (
            (
                r"Their recursion of the cell's gradient $\delta \mathbf{c}_t$:",
                r"\delta \mathbf{c}_t",
                r"\delta \mathbf{y}_t \odot \mathbf{o}_t \odot h'(\mathbf{c}_t) + \mathbf{p}_o \odot "
                r"\delta \bar{\mathbf{o}}_t + \mathbf{p}_i \odot \delta \bar{\mathbf{i}}_{t+1} + \mathbf{p}_f \odot "
                r"\delta \bar{\mathbf{f}}_{t+1} + \delta \mathbf{c}_{t+1} \odot \mathbf{f}_{t+1}",
                r"The same as $\partial L / \partial \mathbf{c}_t$ above, each $\mathbf{v} \odot$ written "
                r"$\operatorname{diag}(\mathbf{v})$.",
            ),
            (
                r"And of the block's output $\delta \mathbf{y}_t$:",
                r"\delta \mathbf{y}_t",
                r"\Delta_t + \mathbf{R}_z^\top \delta \bar{\mathbf{z}}_{t+1} + \mathbf{R}_i^\top "
                r"\delta \bar{\mathbf{i}}_{t+1} + \mathbf{R}_f^\top \delta \bar{\mathbf{f}}_{t+1} + "
                r"\mathbf{R}_o^\top \delta \bar{\mathbf{o}}_{t+1}",
                r"The same as $\partial L / \partial \mathbf{h}_t$ above.",
            ),
        ),
    ),
    "lstm-layernorm": (
        "Ba, Kiros and Hinton (2016) give this cell's forward equations (20 to 22) and no gradient; they normalise "
        "the $D$ units of a vector $\\mathbf{z}$ with a gain $\\boldsymbol{\\alpha}$ and a bias "
        "$\\boldsymbol{\\beta}$.",
        (
            (
                r"Their layer norm, with $\mu = \frac{1}{D} \sum_i z_i$ and no epsilon:",
                r"\operatorname{LN}(\mathbf{z}; \boldsymbol{\alpha}, \boldsymbol{\beta})",
                r"\frac{\mathbf{z} - \mu}{\sigma} \odot \boldsymbol{\alpha} + \boldsymbol{\beta}, \qquad "
                r"\sigma = \sqrt{\frac{1}{D} \sum_{i=1}^{D} (z_i - \mu)^2}",
                r"The same as the norms above but for $\epsilon$: here $\sigma = (\operatorname{var} + "
                r"\epsilon)^{1/2}$ with torch's $\epsilon = 10^{-5}$, since at $\mathbf{h}_0 = \mathbf{0}$ the "
                r"vector $\mathbf{W}_h \mathbf{h}_0$ has $\sigma = 0$. $\boldsymbol{\mu}$, $\boldsymbol{\sigma}$ "
                r"and $\hat{\mathbf{v}}$ are named steps, $D$ is $4h$ for the gates and $h$ for the cell. "
                r"Their adjoint is the textbook's "
                r"$\frac{1}{\sigma}(\mathbf{I} - \frac{1}{D}\mathbf{1}\mathbf{1}^\top - \frac{1}{D}"
                r"\hat{\mathbf{v}}\hat{\mathbf{v}}^\top)$ times the adjoint of $\hat{\mathbf{v}}$.",
            ),
            (
                r"Their gates (20), with $\mathbf{f}_t, \mathbf{i}_t, \mathbf{o}_t, \mathbf{g}_t$ before their "
                r"activations:",
                r"(\mathbf{f}_t, \mathbf{i}_t, \mathbf{o}_t, \mathbf{g}_t)",
                r"\operatorname{LN}(\mathbf{W}_h \mathbf{h}_{t-1}; \boldsymbol{\alpha}_1, \boldsymbol{\beta}_1) "
                r"+ \operatorname{LN}(\mathbf{W}_x \mathbf{x}_t; \boldsymbol{\alpha}_2, \boldsymbol{\beta}_2) "
                r"+ \mathbf{b}",
                r"The same as $\mathbf{a}_t$ above and its four slices, in the paper's order; above, "
                r"$\mathbf{f}_t, \mathbf{i}_t, \mathbf{o}_t, \mathbf{g}_t$ name the slices' activations, as in the "
                r"LSTM, so that the backward reads the activated gates the forward kept. Each norm is of a "
                r"whole $4h$ vector, not of a gate's $h$ units; $\boldsymbol{\beta}_1$, $\boldsymbol{\beta}_2$ "
                r"and $\mathbf{b}$ are added, so only their sum is learned and their gradients are equal.",
            ),
            (
                r"Their cell $\mathbf{c}_t$ (21) and hidden state $\mathbf{h}_t$ (22):",
                r"\mathbf{c}_t",
                r"\sigma(\mathbf{f}_t) \odot \mathbf{c}_{t-1} + \sigma(\mathbf{i}_t) \odot \tanh(\mathbf{g}_t), "
                r"\qquad \mathbf{h}_t = \sigma(\mathbf{o}_t) \odot "
                r"\tanh(\operatorname{LN}(\mathbf{c}_t; \boldsymbol{\alpha}_3, \boldsymbol{\beta}_3))",
                r"The same as above, with the activated gates there. The cell's norm is read by $\mathbf{h}_t$ "
                r"only: step $t+1$ reads "
                r"$\mathbf{c}_t$ itself, where PyTorch's benchmark LayerNormLSTMCell carries the normalised cell as "
                r"its state, and normalises the projections without the bias $\mathbf{b}$.",
            ),
        ),
    ),
}


def compared(model):
    """Whether the document of a model has the section: a zoo model's, not a user's of the same name."""
    return model.name in SOURCES and model.source == _zoo_source(model.name)


def source_section(model):
    """The section comparing the derivation with the model's source (a zoo model's)."""
    opening, rows = SOURCES[model.name]
    equations = [Equation(lhs, rhs, why, after=after) for why, lhs, rhs, after in rows]
    return Section("source", "Against the source", opening, displays(equations))


def _zoo_source(name):
    """The source line of the zoo's model of that name (a user's model may share a zoo name, not its source)."""
    return load(name).source
