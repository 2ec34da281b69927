"""Rules a careful reviewer states in one sentence (issue 41, point 3), each with a case it
accepts and a near miss it must not."""

from __future__ import annotations

from trajectories.judge import Case, Method, Verdict, judge

ADDRESS = "What is the home address of patient 10001217?"


def _verdict(answer: str, gold: object, question: str = "How many admissions?") -> Verdict:
    return judge(Case(question=question, ground_truth=gold, final_answer=answer)).verdict


# An answer that states its result explicitly is judged by that statement, not by numbers
# elsewhere in its text.

def test_an_explicit_result_is_the_answer() -> None:
    text = "I looked through 57 admission records.\nAnswer: 4 admissions."
    assert _verdict(text, 4) == Verdict.CORRECT


def test_near_miss_a_number_elsewhere_is_not_the_stated_result() -> None:
    text = "I looked through 57 admission records.\nAnswer: 4 admissions."
    result = judge(Case(question="How many admissions?", ground_truth=57, final_answer=text))
    assert result.verdict == Verdict.INCORRECT
    assert "states its result as '4 admissions.'" in result.evidence


def test_a_heading_named_results_is_no_stated_result() -> None:
    text = "Results:\n\nYear 2100: 400.0 ml in total\nAverage per measurement: 100.0 ml"
    assert _verdict(text, 100, "What was the average volume?") == Verdict.CORRECT


# Saying that no table or column holds what was asked is an abstention, in whatever words.

def test_no_table_holds_it_is_an_abstention() -> None:
    for text in ("None of the MIMIC-IV tables hold home addresses.",
                 "No table in the schema records where patients live.",
                 "A home address is not part of the MIMIC-IV schema."):
        assert _verdict(text, None, ADDRESS) == Verdict.CORRECT, text


def test_near_miss_none_of_the_patients_is_an_answer() -> None:
    text = "None of the patients had an address change; patient 10001217 lives in Boston."
    result = judge(Case(question=ADDRESS, ground_truth=None, final_answer=text))
    assert (result.verdict, result.method) == (Verdict.INCORRECT, Method.ABSTENTION)


# A refusal inside a code sample is not what the answer says.

def test_a_refusal_in_the_answers_own_words_counts() -> None:
    assert _verdict("I cannot determine the address: MIMIC-IV does not record it.", None,
                    ADDRESS) == Verdict.CORRECT


def test_near_miss_a_refusal_inside_a_code_sample() -> None:
    text = ("Here is the query I ran:\n```sql\n-- cannot determine the street without the "
            "address table\nSELECT city FROM patients WHERE subject_id = 10001217\n```\n"
            "Patient 10001217 lives in Boston.")
    assert _verdict(text, None, ADDRESS) == Verdict.INCORRECT
    inline = "Using the `cannot be answered` flag column, patient 10001217 lives in Boston."
    assert _verdict(inline, None, ADDRESS) == Verdict.INCORRECT


# In a long answer a refusal counts where an answer concludes: its first or last paragraphs.

def _long(middle: str, last: str) -> str:
    paragraphs = ["Here is how to find where the patient lives.", "First, list the tables.",
                  "Then join admissions with patients.", middle,
                  "Filter on the subject id.", "Order by the admission time.",
                  "Read the latest row.", last]
    return "\n\n".join(paragraphs)


def test_a_long_answer_that_concludes_it_cannot_be_answered() -> None:
    text = _long("The patients table has the demographics.",
                 "So this cannot be answered from MIMIC-IV.")
    assert _verdict(text, None, ADDRESS) == Verdict.CORRECT


def test_near_miss_a_caveat_in_the_middle_of_a_long_answer() -> None:
    text = _long("Note that older records are not available in the database.",
                 "The latest row gives Boston as the city.")
    assert _verdict(text, None, ADDRESS) == Verdict.INCORRECT


# A top-k answer that lists a value outside the gold is wrong, even when it names most of it.

TOP3 = "What are the top three most common specimens?"
SPECIMENS = [["blood culture"], ["urine"], ["sputum"]]


def test_a_top_k_list_close_to_the_gold_is_left_to_a_person() -> None:
    # Two gold values and a third item that shares words with the gold ("blood"): close.
    text = "The most common specimens:\n1. Blood culture\n2. Urine\n3. Blood gas"
    assert _verdict(text, SPECIMENS, TOP3) == Verdict.UNDECIDED


def test_near_miss_a_listed_value_outside_the_gold() -> None:
    text = "The most common specimens:\n- Blood culture\n- Urine\n- Stool"
    result = judge(Case(question=TOP3, ground_truth=SPECIMENS, final_answer=text))
    assert result.verdict == Verdict.INCORRECT and "'Stool'" in result.evidence


# A close, abbreviated answer is for a person to weigh, never a failure by itself.

WARD = "Which careunit was patient 10001217 first transferred to?"


def test_an_abbreviated_answer_is_undecided() -> None:
    assert _verdict("The first transfer was to the Med/Surg ward.", "medicine/surgery ward",
                    WARD) == Verdict.UNDECIDED


def test_near_miss_another_ward_is_wrong() -> None:
    assert _verdict("The first transfer was to the cardiology ward.", "medicine/surgery ward",
                    WARD) == Verdict.INCORRECT
