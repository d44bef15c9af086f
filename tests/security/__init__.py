"""The security suite: hostile programs and requests, access control, faults and load."""
