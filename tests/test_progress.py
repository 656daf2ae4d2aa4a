"""The progress bar: never past 100% or a negative time left, and a training speed that
evaluations do not drag down."""

from xiaoyarl.train.progress import TrainingSpeed, progress_text


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_bar_stops_at_the_budget_when_the_last_rollout_overshoots_it():
    """Budgets are rounded up to whole rollouts: 20,480 steps of a 20,000-step budget."""
    text = progress_text(20_480, 20_000, 200.0, 9.5, None)  # was "-2s left"
    assert "100% 20,000/20,000 steps" in text, text
    assert "-" not in text.split("|")[2], text  # no negative time left
    assert "0s left" in text
    assert "100%" in progress_text(20_000, 20_000, 0.0, None, None)


def test_speed_leaves_out_evaluation_time():
    """10,000 env steps per second of training, then a 30 s evaluation, then training again at
    the same speed: the bar keeps saying 10,000 sps, and the time left follows from it."""
    clock = FakeClock()
    speed = TrainingSpeed(0, clock=clock)
    clock.now = 1.0
    assert speed.update(10_000) == 10_000
    with speed.paused():  # an evaluation
        clock.now = 31.0
    assert speed.update(10_000) == 10_000  # nothing trained yet: the last rate stays
    clock.now = 32.0
    rate = speed.update(20_000)
    assert rate == 10_000, rate  # the time in the evaluation does not count
    assert "8s left" in progress_text(20_000, 100_000, rate, None, None)


def test_speed_before_the_first_window_and_a_smoothed_rate_after_it():
    clock = FakeClock()
    speed = TrainingSpeed(1_000, clock=clock)  # a resumed run, from step 1,000
    clock.now = 0.5
    assert speed.update(3_000) == 4_000  # the rate so far, until a full window has passed
    clock.now = 1.0
    assert speed.update(6_000) == 5_000
    clock.now = 2.0
    slower = speed.update(8_000)  # one window at 2,000 sps: the rate moves towards it
    assert 2_000 < slower < 5_000
    for _ in range(30):
        clock.now += 1.0
        rate = speed.update(8_000 + int(2_000 * (clock.now - 2.0)))
    assert abs(rate - 2_000) < 1
