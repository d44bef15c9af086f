"""codegym sandbox: runs untrusted programs fast and safely behind a REST API."""
