"""``tether demo``: the refund agent, a stored approval, and a decision from another process."""
