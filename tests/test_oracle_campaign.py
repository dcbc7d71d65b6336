"""The campaign against vLLM 0.33.0 (issue 10): serq-ref's answers to the
recorded random cases (oracle/data/campaign/)."""

from __future__ import annotations

from oracle.replay import replay

#: vLLM 0.33.0's answer (oracle/real/driver.py): session 1's prompt of 241
#: tokens, 230 of them computed, is preempted at clock 10 by session 0's growth
#: and readmitted at 11 with 224 of its own tokens cached; vLLM reports the
#: prefix hit of its first admission, 0 (the library reported 224 until
#: first_cached, as on 96 of the 1 000 recorded replays).
FIRST_CACHED = {"kind": "replay", "trace": "session,turn,new,out,think,forced\n0,1,154,8,0.0,0\n1,1,241,1,0.0,0\n",
                "spacing": 0, "budget": 39, "max_seqs": 2, "blocks": 26, "block_size": 16, "chunk": 0}
FIRST_CACHED_ROWS = [[0, 1, 0.0, 4.0, 11.0, 154, 0, 8], [1, 1, 0.0, 12.0, 12.0, 241, 0, 1]]


def test_a_replay_reports_the_prefix_hit_of_the_first_admission(tmp_path):
    # lib/vllm.sq's first_cached: vLLM's num_cached_tokens is set at the first
    # scheduling only (vllm/v1/core/sched/scheduler.py:1251-1258, while
    # num_preemptions is 0); the readmission's hit (224) is not reported
    trace = tmp_path / "trace.csv"
    trace.write_text(FIRST_CACHED["trace"])
    rows = replay(str(trace), 0, 39, 2, 26)
    assert [list(row) for row in rows] == FIRST_CACHED_ROWS
