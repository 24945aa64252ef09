"""One module per graph node. Each node is a module-level function ``(state, ...) -> update``."""
