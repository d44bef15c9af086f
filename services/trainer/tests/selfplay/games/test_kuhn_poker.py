"""Kuhn poker's rules: the deal, legal actions, every way a hand ends and what it pays."""

from __future__ import annotations

import random

import pytest
from codegym_trainer.selfplay.games import IllegalMove, KuhnPoker, play


def test_the_deal_is_two_distinct_cards_and_follows_the_seed() -> None:
    deals = {KuhnPoker.new(random.Random(seed)).cards for seed in range(200)}
    assert len(deals) == 6  # every ordered pair of distinct cards
    assert KuhnPoker.new(random.Random(7)) == KuhnPoker.new(random.Random(7))
    with pytest.raises(ValueError):
        KuhnPoker(("K", "K"))


@pytest.mark.parametrize(
    ("history", "to_move", "legal"),
    [
        ((), "first", ("check", "bet")),
        (("check",), "second", ("check", "bet")),
        (("bet",), "second", ("call", "fold")),
        (("check", "bet"), "first", ("call", "fold")),
    ],
)
def test_who_acts_and_what_they_may_do(history: tuple[str, ...], to_move: str, legal: tuple[str, ...]) -> None:
    state = KuhnPoker(("Q", "K"), history)
    assert state.to_move == to_move and state.legal_moves() == legal and not state.is_terminal


@pytest.mark.parametrize(
    ("cards", "history", "first_return"),
    [
        (("K", "J"), ("check", "check"), 1.0),  # showdown for the antes
        (("J", "K"), ("check", "check"), -1.0),
        (("K", "Q"), ("bet", "call"), 2.0),  # showdown for antes and bets
        (("Q", "K"), ("bet", "call"), -2.0),
        (("Q", "J"), ("check", "bet", "call"), 2.0),
        (("J", "K"), ("check", "bet", "call"), -2.0),
        (("J", "Q"), ("bet", "fold"), 1.0),  # a bluff that worked: the folder loses its ante
        (("K", "J"), ("check", "bet", "fold"), -1.0),  # the first player folded the best hand
    ],
)
def test_what_each_ending_pays(cards: tuple[str, str], history: tuple[str, ...], first_return: float) -> None:
    state = KuhnPoker(cards, history)
    assert state.is_terminal and state.to_move is None and state.legal_moves() == ()
    assert state.returns() == {"first": first_return, "second": -first_return}


def test_the_pot_counts_antes_bets_and_calls() -> None:
    assert [KuhnPoker(("J", "Q"), h).pot() for h in [(), ("bet",), ("bet", "call"), ("check", "check")]] == [2, 3, 4, 2]


@pytest.mark.parametrize(
    ("history", "answer"), [((), "[call]"), (("check",), "[fold]"), (("bet",), "I check"), ((), "hmm")]
)
def test_an_illegal_or_unparsable_action_loses_two_chips_at_once(history: tuple[str, ...], answer: str) -> None:
    state = KuhnPoker(("K", "J"), history)
    mover = state.to_move
    after = play(state, answer)
    assert after.is_terminal and after.forfeited_by == mover
    assert after.returns()[mover or ""] == -2.0 and sum(after.returns().values()) == 0.0
    with pytest.raises(IllegalMove):
        state.apply(answer)


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("I'll bet", "bet"),
        ("[CALL]", "call"),
        ("I could check, but [bet]", "bet"),
        ("Check.", "check"),
        ("check or bet?", None),
        ("betting is tempting", None),
        ("[raise]", None),
        ("", None),
    ],
)
def test_parsing_an_action(text: str, move: str | None) -> None:
    assert KuhnPoker(("J", "Q")).parse_move(text) == move


def test_each_role_sees_its_own_card_only() -> None:
    state = KuhnPoker(("K", "J"), ("check",))
    second = state.observation("second")
    assert "Your card: J." in second and "Your card: K." not in second and "as the second player" in second
    assert "first player checks" in second and "Legal actions: check, bet" in second and "Pot: 2 chips" in second
    assert "Your card: K." in state.observation("first") and "Waiting for the second player" in state.observation(
        "first"
    )
