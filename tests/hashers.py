"""A password hasher for the test process: Django's PBKDF2 at a thousand iterations, not a million."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Its hashes are ordinary `pbkdf2_sha256$1000$...` strings: the iteration count is part of the hash,
    so the servers a test starts (with the default hashers) check these passwords as well."""

    iterations = 1000
