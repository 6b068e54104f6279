"""blocktrace explorables: the NumPy engine and the interactive views built on it."""
