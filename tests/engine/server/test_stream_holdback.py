"""Streamed text holds back incomplete UTF-8 and possible stop-string prefixes (unit level)."""

from __future__ import annotations

from engine.server.streaming import TextStreamer, stable_prefix


def test_it_holds_back_a_possible_stop_string_prefix() -> None:
    assert stable_prefix("return x\n\nde", ["\n\ndef"]) == "return x"
    assert stable_prefix("return x", ["\n\ndef"]) == "return x"


def test_it_holds_back_an_incomplete_utf8_sequence() -> None:
    assert stable_prefix("caf\ufffd", []) == "caf"


def test_it_sends_only_a_prefix_of_the_final_text() -> None:
    texts = {1: "a = 1\n", 2: "a = 1\n\nde", 3: "a = 1\n\ndef g"}
    streamer = TextStreamer(lambda ids: texts[len(ids)], ["\n\ndef"])
    sent = streamer.update([0]) + streamer.update([0, 0]) + streamer.update([0, 0, 0])
    assert sent == "a = 1"  # the newline could have begun the stop string
    assert sent + streamer.finish("a = 1\n") == "a = 1\n"
