"""Pre-labellers: propose a failure category for a failed trajectory before people review it."""
