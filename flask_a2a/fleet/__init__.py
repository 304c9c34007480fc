"""A fleet of processes: the Redis bus and the Redis-backed limits shared across them."""
