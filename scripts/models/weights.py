"""Seeded random weights for the generated models, and the table rows that describe them.

Promises: the same (seed, name, shape, std, mean) gives the same float32 values on every run.
Seeded draws each tensor from its own generator, seeded by sha256(seed|name|shape), so a file's
tensors do not depend on which others it holds (a draft with fewer layers is its target's
prefix); Stream draws every tensor from one generator in call order (fast, for big timing
files, where the order of the table is the seed). A tensor is a table row
(name, value, matrix?) whose value is a Draw (or a list of them: concatenated rows), an array, or
a function of the generator.
"""
import hashlib
from collections import namedtuple

import numpy as np

# seed: the name the generator is seeded with; the value is scale * (mean + std * N(0, 1)).
Draw = namedtuple("Draw", "seed shape std mean scale", defaults=(0.0, 1.0))

NORM = (0.1, 1.0)  # an RMSNorm weight's (std, mean)


def norm(seed, n, scale=1.0):
    """An RMSNorm weight: around 1 (std 0.1), times scale."""
    return Draw(seed, (n,), *NORM, scale)


def seed_names(prefix="", short=False):
    """name -> the name its generator is seeded with: prefix + name, less ".weight" or ".bias"
    when short (but token_embd.weight and output.weight keep it)."""
    def seed(name):
        if short and name not in ("token_embd.weight", "output.weight"):
            name = name.removesuffix(".weight").removesuffix(".bias")
        return prefix + name
    return seed


def table(seed):
    """row(name, shape, std, mean=0, scale=1, kind=True): a table row drawn with the seed name
    seed(name); kind: True for a matrix, False for a vector, or a ggml type."""
    def row(name, shape, std, mean=0.0, scale=1.0, kind=True):
        return name, Draw(seed(name), shape, std, mean, scale), kind
    return row


def fan_in(n, gain=1.0, residual=1.0):
    """The std of a matrix over n inputs: residual * (gain * n^-1/2)."""
    return residual * (gain * n**-0.5)


class Seeded:
    """Per-tensor generators: seed from sha256(seed|name|shape). f32 draws float32 normals (else
    float64, rounded to float32 at the end)."""

    def __init__(self, seed, f32=False):
        self.seed, self.f32 = seed, f32

    def randn(self, name, shape, std, mean=0.0):
        h = hashlib.sha256(f"{self.seed}|{name}|{shape}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(h[:8], "little"))
        x = rng.standard_normal(shape, dtype=np.float32) if self.f32 else rng.standard_normal(shape)
        return (mean + std * x).astype(np.float32)


class Stream:
    """One generator for every tensor, in call order; names are ignored."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def randn(self, name, shape, std, mean=0.0):
        return (mean + std * self.rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)


def generator(h):
    """The generator a model's hparams ask for: Stream(h["stream"]), else Seeded(h["seed"])."""
    return Stream(h["stream"]) if "stream" in h else Seeded(h["seed"], f32=h.get("f32", False))


def value(gen, v):
    """A row's value as a float32 array."""
    if isinstance(v, Draw):
        return v.scale * gen.randn(v.seed, v.shape, v.std, v.mean)
    if isinstance(v, list):
        return np.concatenate([value(gen, x) for x in v])
    return v(gen) if callable(v) else v


def row_scaled(draw, seed, std):
    """A matrix whose rows have norms spread log-normally (std): an output head's logits."""
    def make(gen):
        w = value(gen, draw)
        w *= np.exp(gen.randn(seed, (draw.shape[0], 1), std))
        return w
    return make


def neg_exp(draw):
    """-exp(N): a recurrent decay parameter (ssm_a)."""
    return lambda gen: -np.exp(value(gen, draw))


def materialize(gen, rows, wtype, vtype):
    """(name, array, ggml type) for rows (name, value, matrix?): matrices in wtype, the rest in
    vtype; a row's own ggml type (an int in place of matrix?) wins."""
    for name, v, kind in rows:
        t = kind if not isinstance(kind, bool) else (wtype if kind else vtype)
        yield name, value(gen, v), t
