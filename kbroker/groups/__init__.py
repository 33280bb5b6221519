"""Consumer groups' state; so far the OffsetStore (committed offsets in ``__consumer_offsets``)."""
