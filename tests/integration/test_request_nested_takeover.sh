#!/usr/bin/env bash
# test_request_nested.sh across a take-over: the sockets handed over keep
# the old controller's verdict program (a psock keeps the programs it was
# added with), new ones get the successor's, and both run on one CPU at
# once. They share the pinned chain map; with a nest count each (unpinned,
# before 2026-12-03's review) both took chain slot 0 and the misrouting
# and lost routes came back.
KVS_NESTED_TAKEOVER=1 exec bash "$(dirname "$0")/test_request_nested.sh"
