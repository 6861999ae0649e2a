"""The lab's own state beside its parts: events (dashboard markers), problems a person must repair, and what a starting controller found left by one that died."""
