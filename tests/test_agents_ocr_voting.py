"""The OCR baseline's vote over several readings of one document (no OCR needed: readings from words)."""

from __future__ import annotations

from vtb_agents.ocr_baseline.reading import Row, parse_reading
from vtb_agents.ocr_baseline.rules import plausible
from vtb_agents.ocr_baseline.voting import same_documents, vote
from vtb_env.ocr import OcrWord


def _reading(*rows: tuple[str, str, float]):
    """A reading of a table whose rows are ``(label, value, confidence)``, one printed line each."""
    words = []
    for i, (label, value, confidence) in enumerate(rows):
        words.append(OcrWord(label, (0, 40 * i, 10 * len(label), 40 * i + 20), confidence))
        words.append(OcrWord(value, (200, 40 * i, 200 + 10 * len(value), 40 * i + 20), confidence))
    return parse_reading(words)


def test_a_digit_misread_once_is_outvoted_and_agreeing_rows_count_their_votes():
    a = _reading(("Hospital", "118", 0.9), ("Museum", "15:45", 0.9), ("Harbour", "243.89", 0.95))
    b = _reading(("Hospital", "1181", 0.96), ("Museum", "15:45", 0.5), ("Harbour", "213.89", 0.6))
    c = _reading(("Hospital", "118", 0.5), ("Harbour", "213.89", 0.7))
    rows = {r.label: r for r in vote([a, b, c]).rows}
    assert (rows["Hospital"].text, rows["Hospital"].votes) == ("118", 2)  # the more confident 1181 is one reading
    assert (rows["Harbour"].text, rows["Harbour"].votes) == ("213.89", 2)
    assert (rows["Museum"].text, rows["Museum"].votes, rows["Museum"].confidence) == ("15:45", 2, 0.9)
    # two readings, no majority: the more confident one
    assert {r.text for r in vote([a, b]).rows if r.label == "Hospital"} == {"1181"}


def test_a_name_misread_in_one_reading_takes_the_printed_name_and_a_code_misread_takes_the_majority():
    a = _reading(("Carbonare", "$25.25", 0.9), ("S83", "204.18", 0.9))
    b = _reading(("Carbonara", "$25.25", 0.4), ("S-3", "204.18", 0.6))
    c = _reading(("S-3", "204.18", 0.5))
    rows = {r.label: r.text for r in vote([a, b, c]).rows}
    assert rows == {"Carbonara": "$25.25", "S-3": "204.18"}


def test_a_row_read_with_low_confidence_is_no_noise_when_a_second_reading_agrees():
    noisy = _reading(("Oakvale", "46", 0.7), ("Kingsbay", "62", 0.2), ("Riverton", "35", 0.9))
    assert max(plausible(noisy.rows), key=lambda r: r.value).label == "Oakvale"  # one reading: 0.2 is noise
    again = _reading(("Oakvale", "46", 0.6), ("Kingsbay", "62", 0.25))
    assert max(plausible(vote([noisy, again]).rows), key=lambda r: r.value).label == "Kingsbay"


def test_regions_showing_one_sheet_are_one_document_and_the_original_joins_it():
    sheet = [_reading(("Oakvale", "46", 0.7), ("Riverton", "35", 0.9))]
    found_again = [_reading(("Oakvale", "46", 0.5), ("Riverton", "35", 0.4), ("Kingsbay", "62", 0.3))]
    other = [_reading(("Ravensby", "45", 0.9), ("Highgate", "33", 0.9))]
    original = _reading(("Riverton", "35", 0.8), ("Kingsbay", "62", 0.8))
    docs = same_documents([sheet, found_again, other], original)
    assert [len(d) for d in docs] == [3, 1]  # the sheet read twice (and in the original), the decoy alone
    assert {r.label: r.votes for r in vote(docs[0]).rows} == {"Oakvale": 2, "Riverton": 3, "Kingsbay": 2}


def test_a_reading_far_less_legible_than_the_best_does_not_vote():
    clean = _reading(("Platelets", "174.0", 0.9), ("Urea", "14.0", 0.9), ("Glucose", "152.0", 0.9))
    turned = _reading(("Tm", "6", 0.2))  # a wrong quarter turn: noise
    assert {r.label for r in vote([clean, turned]).rows} == {"Platelets", "Urea", "Glucose"}


def test_a_reference_range_read_out_of_order_is_dropped_and_the_vote_takes_the_most_read_range():
    def lab(rng: str, confidence: float):
        words = [("Platelets", 0), ("174.0", 150), (rng, 260)]
        return parse_reading([OcrWord(t, (x, 0, x + 80, 20), confidence) for t, x in words])

    assert lab("150-9", 0.9).rows[0].extra == ()
    rows = vote([lab("150-400", 0.5), lab("10-99", 0.9), lab("150-400", 0.6)]).rows
    assert [r.extra for r in rows] == [(150.0, 400.0)]


def test_slips_of_one_row_read_with_one_value_are_one_row_named_as_printed():
    """Real readings of one scoreboard (seed 61): ``Pwates 93`` beside ``Pirates 93`` made a stdev of ten
    entries out of seven; ``Fakons``, read alike four times, is too far for one reading's snap (0.77)."""
    a = _reading(("Pwales", "93", 0.7), ("Fakons", "19", 0.9), ("Trans", "73", 0.8), ("Coersr soled", "24", 0.3))
    b = _reading(("Pirates", "93", 0.9), ("Fakons", "19", 0.9), ("Titans", "73", 0.7), ("Coesarsoled", "24", 0.2))
    assert {r.label: r.text for r in vote([a, b]).rows} == {
        "Pirates": "93",
        "Falcons": "19",
        "Titans": "73",
        "Caesar salad": "24",  # a demo menu's two readings of it
    }
    assert {r.label for r in vote([a]).rows} == {"Pwales", "Fakons", "Trans", "Coersr soled"}  # one reading: as read


def test_a_value_read_as_digits_outvotes_letters_read_as_digits():
    """A real statement (seed 61): ``ORVA i181``, ``ORVA 181i`` and ``ORVA 181``; the rule beside the print is
    no digit (``1811`` made ORVA the largest holding)."""
    readings = [_reading(("ORVA", v, 0.6), ("MERO", "35", 0.9)) for v in ("i181", "181i", "181i", "181")]
    assert [r.text for r in readings[0].rows if r.label == "ORVA"] == ["1181"]  # one reading alone: as read
    assert {r.label: r.text for r in vote(readings).rows} == {"ORVA": "181", "MERO": "35"}


def test_a_stray_mark_beside_a_document_is_no_entry():
    """A photo's reading of a scoreboard with "We 300" read off the desk beside it: every-entry questions
    drop a row far from every other; a second column and a chart's bars on one line stay."""
    from vtb_agents.ocr_baseline.solving import without_strays

    column = [Row(f"Team{i}", str(20 + i), 20.0 + i, center=(222.0 + (i % 3), 232.0 + 53 * i)) for i in range(8)]
    stray = Row("We", "300", 300.0, center=(687.0, 180.0))
    assert without_strays([stray, *column]) == column
    two_columns = column + [Row(f"Right{i}", "5", 5.0, center=(600.0, 232.0 + 53 * i)) for i in range(4)]
    assert without_strays(two_columns) == two_columns
    bars = [Row(f"C{i}", "13.1", 13.1, center=(152.0 + 152 * i, 700.0 - i % 2)) for i in (0, 1, 2, 3, 6, 7)]
    assert without_strays(bars) == bars  # a bar chart's labels lie on one line, two bars unread between
