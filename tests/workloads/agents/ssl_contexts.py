"""ssl_contexts.py: an SSL context made per session with a CA bundle, for the agent test of
OpenSSL's reads (crates/dejavu/tests/agent_gaps.rs): the bundle is read in C, by libcrypto,
under SSLContext.load_verify_locations; each read must name the line that made the context.

usage: python3 ssl_contexts.py CAFILE N"""
import ssl
import sys


def session(ca):
    return ssl.create_default_context(cafile=ca)  # @site context session


for _ in range(int(sys.argv[2])):
    session(sys.argv[1])
