"""Rules for shape manipulation."""

# ruff: noqa: I001  (the imports below are in registration order)
# reshape, ravel, transposes, squeeze, expand_dims, flips, broadcast_to, copy
from rules.numpy.shape import views as views

# append, atleast_*d, column_stack, rot90, astype, partition, real_if_close
from rules.numpy.shape import forms as forms
