"""Labels: annotation store, queues, agreement, the validity audit and pre-labellers."""
