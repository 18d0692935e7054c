"""A document's building blocks: equations with the sentence that justifies them."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Equation:
    lhs: str
    rhs: str
    why: str


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    equations: tuple
