"""laglab's controller: lag recording, consistency checks and network shaping over REST."""
