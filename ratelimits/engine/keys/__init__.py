"""Who is counted, and under which Redis key: key names (:mod:`~.names`), the identity
part of a key (:mod:`~.identity`, hashed where it could be a secret), hashed identities
across a ``SECRET_KEY`` rotation (:mod:`~.rotation`) and the networks no policy limits
(:mod:`~.exemptions`)."""
