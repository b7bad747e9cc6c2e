"""Agent tests in pytest, tracked as experiments (the ``pytest11`` plugin's public side).

    import pytest
    from assay import testing as t

    @pytest.mark.assay            # or @pytest.mark.langsmith, with LangSmith's arguments
    @pytest.mark.parametrize("question, answer", [("2+2?", "4"), ("3*3?", "9")])
    def test_math(question, answer):
        t.log_inputs({"question": question})
        t.log_reference_outputs({"answer": answer})
        got = agent(question)
        t.log_outputs({"answer": got})
        t.expect.edit_distance(got, answer).to_be_less_than(0.5)
        assert answer in got

Each marked test is an example of the suite's dataset; the session is one experiment; pass or
fail, logged feedback, ``expect`` outcomes and the three agent evaluators' results are its
feedback. The names and signatures are ``langsmith.testing``'s.
"""

from ._case import log_feedback, log_inputs, log_outputs, log_reference_outputs, trace_feedback
from ._expect import expect

__all__ = ["expect", "log_feedback", "log_inputs", "log_outputs", "log_reference_outputs",
           "trace_feedback"]
