"""Git's smart HTTP edge: routing, Basic auth, request slots, bounded bodies and 4xx answers,
and upload-pack serving only what the caller may read. Storage, pushes' packs and snapshots
stay in `forkhorse.adapters.git`, which this package drives and which never imports it."""
