"""Rules for indexing and for the functions that write into an array."""

# x[idx], x[idx] = v, np.add.at, np.subtract.at
from rules.numpy.indexing import subscript as subscript
from rules.numpy.indexing import writes as writes  # fill_diagonal, put, place, putmask

# isort: split
# frules and vjp rules, registered beside the reverse rules above (so after them); scatter_add
from rules.numpy.indexing import forward as forward
