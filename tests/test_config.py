"""The FAST switch, pick, the device and seeding."""
import numpy as np
import torch

from course_utils import config


def test_fast_mode_switch():
    assert config.fast_mode({"COURSE_FAST": "1"})
    assert config.fast_mode({"CI": "true"})
    assert not config.fast_mode({})
    assert not config.fast_mode({"CI": "true", "COURSE_FAST": "0"})  # an explicit choice wins
    assert not config.fast_mode({"CI": "false"})


def test_pick_follows_fast():
    assert config.pick("fast", "full") == ("fast" if config.FAST else "full")


def test_device_is_a_torch_device():
    assert isinstance(config.DEVICE, torch.device)
    assert config.DEVICE.type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_seed_everything_repeats():
    config.seed_everything(3)
    a = (np.random.rand(3), torch.rand(3))
    config.seed_everything(3)
    b = (np.random.rand(3), torch.rand(3))
    assert np.array_equal(a[0], b[0]) and torch.equal(a[1], b[1])
