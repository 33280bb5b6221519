"""The ack timeline tool on a real kbroker cluster: every stage of one acks=all write is traced."""

from compat.bench import ack_timeline


def test_one_traced_write_shows_every_stage(tmp_path, capsys):
    assert ack_timeline.main(["--records", "1", "--warmup", "50", "--partitions", "3", "--gap-ms", "0",
                              "--workdir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    for what in ("Produce received", "leader append offset", "follower append offset", "next fetch sent",
                 "fetch position past", "high watermark →", "Produce answered", "acknowledged (delivery report)"):
        assert what in text, text
    # both followers copied the record (RF 3)
    assert text.split("median over")[0].count("follower append offset") == 2, text
