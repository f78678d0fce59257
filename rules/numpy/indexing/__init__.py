"""Rules for indexing and for the functions that write into an array."""

# x[idx], x[idx] = v, np.add.at, np.subtract.at
from rules.numpy.indexing import subscript as subscript
from rules.numpy.indexing import writes as writes  # fill_diagonal, put, place, putmask
