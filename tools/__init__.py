"""Repository tools (documentation generators): not part of the package; run from a checkout."""
