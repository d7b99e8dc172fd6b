"""End to end: `tfktopic topics pretrained:gbn-rnn-apnews --html FILE --picture FILE.png`."""

import json
import re

from tfktopic import cli


def test_topics_html_of_a_pretrained_run_embeds_every_topic_offline(tmp_path, capsys):
    page, picture = tmp_path / "view.html", tmp_path / "topics.png"
    assert cli.main(["topics", "pretrained:gbn-rnn-apnews", "--top-n", "5",
                     "--html", str(page), "--picture", str(picture)]) == 0
    assert f"wrote {page}" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"https?://", text)
    data = json.loads(re.search(r'id="topic-data">(.*?)</script>', text, re.S).group(1))
    topics = data["layers"][0]["topics"]
    assert [t["id"] for t in topics] == list(range(len(topics))) and len(topics) > 1
    assert data["layers"][0]["has_usage"]                 # the stored usage sizes the circles
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 5000


def test_topics_html_with_a_wrong_suffix_is_one_error_line(capsys):
    assert cli.main(["topics", "pretrained:gbn-rnn-apnews", "--html", "view.txt"]) == 2
    assert "--html view.txt: the file must end in .html" in capsys.readouterr().err
