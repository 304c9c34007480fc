"""Push notifications: webhook delivery, the secrets of push configs, and the SSRF guard.
"""
