"""Network shaping of lab containers and links: parameters, backends, the executor, the manager."""
