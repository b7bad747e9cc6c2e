"""data=: dataset name / id / Dataset / examples / dicts; as_of and splits pin what runs."""

from __future__ import annotations

import pytest

from assay import evaluate
from assay.client import Client
from assay.errors import InvalidInputError, NotFoundError


def _echo(inputs: dict) -> dict:
    return {"x": inputs["x"]}


def _xs(res) -> list[int]:
    return [r["example"].inputs["x"] for r in res]


def test_dataset_by_name_id_object_and_examples(client: Client) -> None:
    ds = client.create_dataset("d")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"x": i}} for i in range(3)])
    examples = list(client.list_examples(dataset_id=ds.id))
    for data, want in [("d", [0, 1, 2]), (str(ds.id), [0, 1, 2]), (ds.id, [0, 1, 2]),
                       (ds, [0, 1, 2]), (examples, [0, 1, 2]), (examples[1:], [1, 2])]:
        res = evaluate(_echo, data=data, client=client)
        assert _xs(res) == want
        exp = client.read_project(project_id=res.experiment_id)
        assert str(exp.reference_dataset_id) == str(ds.id)


def test_dicts_become_a_stored_dataset(client: Client) -> None:
    res = evaluate(_echo, data=({"inputs": {"x": i}, "outputs": {"x": i}} for i in (5, 3, 9)),
                   client=client, experiment_prefix="gen")
    assert _xs(res) == [5, 3, 9]  # in the order given
    exp = client.read_project(project_id=res.experiment_id)
    stored = list(client.list_examples(dataset_id=exp.reference_dataset_id))
    assert sorted(e.inputs["x"] for e in stored) == [3, 5, 9]
    assert all(r["run"].reference_example_id == r["example"].id for r in res)


def test_as_of_and_splits(client: Client) -> None:
    ds = client.create_dataset("v")
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": 0}, "split": "train"}, {"inputs": {"x": 1}, "split": "test"},
        {"inputs": {"x": 2}, "split": ["train", "test"]}])
    v1 = client.update_dataset_tag(dataset_id=ds.id, tag="v1")
    ex = list(client.list_examples(dataset_id=ds.id))
    client.update_example(ex[0].id, inputs={"x": 100})
    client.create_example({"x": 3}, dataset_id=ds.id, split="test")

    now = evaluate(_echo, data="v", client=client)
    assert _xs(now) == [100, 1, 2, 3]
    old = evaluate(_echo, data="v", client=client, as_of="v1")
    assert _xs(old) == [0, 1, 2]
    meta = client.read_project(project_id=old.experiment_id).metadata
    assert meta["dataset_version"] == v1.as_of.isoformat()
    assert meta["dataset_splits"] == ["test", "train"]
    at_time = evaluate(_echo, data="v", client=client, as_of=v1.as_of)
    assert _xs(at_time) == [0, 1, 2]
    test = evaluate(_echo, data="v", client=client, splits=["test"], num_repetitions=2)
    assert _xs(test) == [1, 2, 3] * 2
    meta = client.read_project(project_id=test.experiment_id).metadata
    assert meta["dataset_splits"] == ["test"] and meta["num_repetitions"] == 2
    with pytest.raises(InvalidInputError, match="no examples in split"):
        evaluate(_echo, data="v", client=client, splits=["nope"])
    with pytest.raises(NotFoundError, match="v9"):
        evaluate(_echo, data="v", client=client, as_of="v9")


def test_bad_data(client: Client) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        evaluate(_echo, data=[], client=client)
    with pytest.raises(InvalidInputError, match="'inputs'"):
        evaluate(_echo, data=[{"x": 1}], client=client)
    with pytest.raises(InvalidInputError, match="dataset name or id"):
        evaluate(_echo, data={"inputs": {}}, client=client)
    with pytest.raises(InvalidInputError, match="as_of and splits"):
        evaluate(_echo, data=[{"inputs": {"x": 1}}], client=client, splits=["a"])
    with pytest.raises(InvalidInputError, match="give data"):
        evaluate(_echo, client=client)
    with pytest.raises(NotFoundError, match="'missing'"):
        evaluate(_echo, data="missing", client=client)
