from __future__ import annotations

from engine_client.sse import SSEDecoder, iter_events


def test_it_decodes_data_events_and_the_done_marker() -> None:
    events = list(iter_events([b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]))
    assert [e.data for e in events] == ['{"a": 1}', "[DONE]"]
    assert events[1].is_done and not events[0].is_done


def test_it_reassembles_events_split_anywhere_including_inside_utf8_and_crlf() -> None:
    raw = 'event: delta\r\nid: 7\r\ndata: {"text": "é→"}\r\n\r\ndata: two\r\n\r\n'.encode()
    for cut in range(1, len(raw)):
        events = list(iter_events([raw[:cut], raw[cut:]]))
        assert [e.data for e in events] == ['{"text": "é→"}', "two"], cut
        assert events[0].event == "delta" and events[0].id == "7"


def test_it_joins_multiline_data_and_skips_comments() -> None:
    events = list(iter_events([b": keep-alive\n\ndata: line1\ndata: line2\nretry: 500\n\n"]))
    assert len(events) == 1 and events[0].data == "line1\nline2" and events[0].retry == 500


def test_it_dispatches_a_final_event_without_a_blank_line_on_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: last") == []
    assert [e.data for e in decoder.flush()] == ["last"]


def test_it_handles_bare_cr_line_endings() -> None:
    assert [e.data for e in iter_events([b"data: a\r\rdata: b\r\r"])] == ["a", "b"]
