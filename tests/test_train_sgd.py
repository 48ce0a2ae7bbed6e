"""train.sgd: HeavyBall against torch.optim.SGD (an independent implementation of the
same rule) and MinibatchTrainer's epochs, sampler and resume."""

import pytest
import torch

from deqlab.train.sgd import HeavyBall, MinibatchTrainer


def _problem(seed=0):
    gen = torch.Generator().manual_seed(seed)
    X, y = torch.randn(20, 4, generator=gen), torch.randn(20, generator=gen)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.copy_(torch.randn(1, 4, generator=gen))
        model.bias.zero_()
    return model, X, y


def _trainer(model, X, y, optimizer, seed=3):
    def batch_loss(index):
        return ((model(X[index])[:, 0] - y[index]) ** 2).mean()

    return MinibatchTrainer(model, batch_loss, optimizer, n=20, batch_size=6, seed=seed)


@pytest.mark.parametrize("momentum", [0.0, 0.8])
def test_heavy_ball_matches_torch_sgd(momentum):
    ours, X, y = _problem()
    theirs, _, _ = _problem()
    a = _trainer(ours, X, y, HeavyBall(ours.parameters(), lr=0.05, momentum=momentum))
    b = _trainer(theirs, X, y, torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=momentum))
    a.run(5)
    b.run(5)
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    assert [r["loss"] for r in a.records] == pytest.approx([r["loss"] for r in b.records])


def test_an_epoch_visits_every_sample_once_and_records_the_sample_mean_loss():
    model, X, y = _problem()
    seen = []

    def batch_loss(index):
        seen.append(index.clone())
        return ((model(X[index])[:, 0] - y[index]) ** 2).sum() * 0  # no move: loss at θ(0)

    optimizer = HeavyBall(model.parameters(), lr=0.1, momentum=0.0)
    record = MinibatchTrainer(model, batch_loss, optimizer, n=20, batch_size=6, seed=0).step()
    assert [len(i) for i in seen] == [6, 6, 6, 2]
    assert sorted(torch.cat(seen).tolist()) == list(range(20)) and record["loss"] == 0.0


def test_counts_returned_with_the_batch_loss_are_summed_over_the_epoch():
    model, X, y = _problem()

    def batch_loss(index):
        residual = model(X[index])[:, 0] - y[index]
        counts = {"samples": len(index), "positive": int((residual > 0).sum())}
        return (residual**2).mean() * 0, counts  # no move: every batch sees θ(0)

    optimizer = HeavyBall(model.parameters(), lr=0.1, momentum=0.0)
    with torch.no_grad():
        positive = int((model(X)[:, 0] - y > 0).sum())
    record = MinibatchTrainer(model, batch_loss, optimizer, n=20, batch_size=6, seed=1).step()
    assert record["samples"] == 20 and record["batches"] == 4 and record["positive"] == positive


def test_resume_gives_the_numbers_of_an_uninterrupted_run():
    def fresh():
        model, X, y = _problem()
        adam = torch.optim.Adam(model.parameters(), lr=0.01)
        return _trainer(model, X, y, adam)

    full = fresh()
    full.run(4)
    part = fresh()
    part.run(2)
    again = fresh()
    again.load_state_dict(part.state_dict())
    again.run(2)
    assert again.records == full.records
    for p, q in zip(again.model.parameters(), full.model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_bad_arguments():
    model, _, _ = _problem()
    with pytest.raises(ValueError, match="`momentum` must be in"):
        HeavyBall(model.parameters(), lr=0.1, momentum=1.0)
    with pytest.raises(ValueError, match="`batch_size` must be"):
        MinibatchTrainer(model, lambda i: i, HeavyBall(model.parameters(), lr=0.1, momentum=0),
                         n=5, batch_size=0, seed=0)  # fmt: skip
