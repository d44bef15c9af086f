"""Tic-tac-toe's rules: turns, every winning line, draws, and an illegal or unparsable answer losing at once."""

from __future__ import annotations

import pytest
from codegym_trainer.selfplay.games import IllegalMove, TicTacToe, play
from codegym_trainer.selfplay.games.tictactoe import LINES


def test_the_empty_board_has_x_to_move_and_nine_free_cells() -> None:
    start = TicTacToe.new()
    assert start.to_move == "X" and not start.is_terminal
    assert start.legal_moves() == tuple(str(i) for i in range(1, 10))


def test_turns_alternate_and_marks_land_where_named() -> None:
    state = TicTacToe().apply("5").apply("1")
    assert state.board == ("O", ".", ".", ".", "X", ".", ".", ".", ".")
    assert state.to_move == "X" and "5" not in state.legal_moves()


@pytest.mark.parametrize("line", LINES)
def test_three_in_any_line_wins(line: tuple[int, int, int]) -> None:
    others = [i for i in range(9) if i not in line][:2]  # O's two moves, never completing a line of its own
    state = TicTacToe()
    for x, o in zip(line, [*others, None], strict=True):
        state = state.apply(str(x + 1))
        if o is not None:
            state = state.apply(str(o + 1))
    assert state.is_terminal and state.to_move is None and state.legal_moves() == ()
    assert state.returns() == {"X": 1.0, "O": -1.0}


def test_o_wins_too() -> None:
    state = TicTacToe.from_rows("XX.", "OOO", "X..")
    assert state.returns() == {"X": -1.0, "O": 1.0}


def test_a_full_board_without_a_line_is_a_draw() -> None:
    state = TicTacToe.from_rows("XOX", "XOO", "OXX")
    assert state.is_terminal and state.returns() == {"X": 0.0, "O": 0.0}


def test_a_line_made_by_the_last_move_is_a_win_not_a_draw() -> None:
    assert TicTacToe.from_rows("XOX", "OXO", "XOX").returns() == {"X": 1.0, "O": -1.0}


@pytest.mark.parametrize("answer", ["[1]", "[10]", "[0]", "I pass", ""])
def test_an_occupied_cell_a_cell_off_the_board_or_no_cell_loses_at_once(answer: str) -> None:
    state = TicTacToe.from_rows("X..", "...", "...")  # O to move; cell 1 is taken
    after = play(state, answer)
    assert after.is_terminal and after.forfeited_by == "O"
    assert after.returns() == {"X": 1.0, "O": -1.0}
    assert after.board == state.board


def test_a_legal_answer_is_played() -> None:
    assert play(TicTacToe(), "I take the centre: [5]").board[4] == "X"


def test_apply_refuses_an_illegal_move_and_a_finished_game_takes_no_answer() -> None:
    with pytest.raises(IllegalMove):
        TicTacToe().apply("10")
    with pytest.raises(IllegalMove):
        play(TicTacToe.from_rows("XXX", "OO.", "..."), "[9]")
    with pytest.raises(ValueError):
        TicTacToe().returns()


@pytest.mark.parametrize(
    ("text", "move"),
    [
        ("[5]", "5"),
        ("I play 5", "5"),
        ("I play 5.", "5"),
        ("[ 7 ]", "7"),
        ("[05]", "5"),
        ("3 is taken and 5 is risky, so [9]", "9"),
        ("First [3]... no, better [8]", "8"),
        ("[12]", "12"),
        ("5 or 7", None),
        ("3.5", None),
        ("the 5th cell", None),
        ("garbage", None),
        ("", None),
    ],
)
def test_parsing_a_cell(text: str, move: str | None) -> None:
    assert TicTacToe().parse_move(text) == move


def test_the_observation_shows_the_board_the_role_and_the_answer_format() -> None:
    state = TicTacToe.from_rows("X.O", "...", "...")
    mine = state.observation("X")
    assert "as X" in mine and " X | 2 | O" in mine
    assert "Free cells: 2, 4, 5, 6, 7, 8, 9" in mine and "[2]" in mine
    assert "Waiting for X" in state.observation("O")
    with pytest.raises(ValueError):
        state.observation("Z")


@pytest.mark.parametrize("rows", [("XXX", "...", "..."), ("O..", "...", "..."), ("XO", "...", "...")])
def test_impossible_positions_are_refused(rows: tuple[str, str, str]) -> None:
    with pytest.raises(ValueError):
        TicTacToe.from_rows(*rows)
