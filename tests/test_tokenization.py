"""The BPE subword vocabulary: special ids, exact round trip, saving, sizes."""
import pytest

from course_utils.data.multi30k import load_multi30k
from course_utils.tokenization import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer, train_bpe, vocabulary_summary

pytestmark = pytest.mark.multi30k  # the module's fixtures train on Multi30k


@pytest.fixture(scope="module")
def pairs():
    return load_multi30k("train", max_pairs=2000)


@pytest.fixture(scope="module")
def tok(pairs):
    return train_bpe((s for p in pairs for s in p), vocab_size=1000)


def test_special_ids_and_size(tok):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert 900 <= tok.vocab_size <= 1000


def test_round_trip_is_exact_and_cased(tok, pairs):
    for de, en in pairs[:300]:
        for text in (de, en):
            assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode("A Dog, (running) fast!")) == "A Dog, (running) fast!"


def test_bos_eos_and_decode_stops_at_eos(tok):
    ids = tok.encode("Ein Hund.", bos=True, eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert tok.decode(ids) == "Ein Hund."
    assert tok.decode(ids + [5, 6, 7]) == "Ein Hund."                    # everything after <eos> dropped
    assert tok.decode(ids[1:-1] + [PAD_ID, PAD_ID]) == "Ein Hund."
    assert tok.encode_batch(["Ein Hund.", "Zwei"], eos=True)[0] == tok.encode("Ein Hund.") + [EOS_ID]


def test_subwords_split_rare_words(tok):
    pieces = tok.tokens("Antriebsradsystem")
    assert len(pieces) > 1 and pieces[0].startswith("▁")
    summary = vocabulary_summary(tok, ["Ein Mann fährt Fahrrad."])
    assert summary["unk_rate"] == 0.0 and summary["pieces_per_sentence"] > 3


def test_save_and_load(tok, tmp_path):
    path = tmp_path / "run" / "tokenizer.json"
    tok.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["tokenizer.json"]
    again = SubwordTokenizer.load(path)
    text = "Zwei Hunde spielen im Schnee."
    assert again.encode(text) == tok.encode(text)
    assert SubwordTokenizer.from_str(tok.to_str()).vocab_size == tok.vocab_size
