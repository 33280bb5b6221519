"""Listening ports for test nodes come from below the ephemeral range and are free when handed out."""

from __future__ import annotations

import socket

from kbroker.testing.ports import PortWalk, ephemeral_range_start, free_port


def test_a_port_is_below_the_ephemeral_range_and_a_listener_can_bind_it() -> None:
    port = free_port()
    assert port < ephemeral_range_start()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()


def test_a_port_something_is_bound_to_is_passed_over() -> None:
    walk = PortWalk()
    taken = walk.first + walk.offset
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        following = walk.first + (walk.offset + 1) % walk.width
        assert walk.next_free("127.0.0.1") == following
