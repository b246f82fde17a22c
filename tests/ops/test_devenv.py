"""plait.devenv: the file `plait dev` publishes its URLs in."""
from __future__ import annotations

import os
import subprocess
import sys

from plait.devenv import (DEV_FILE, PID_KEY, dev_value, parse_dev_file, read_dev_env,
                          remove_dev_env, write_dev_env)


def test_written_file_is_shell_and_read_back(tmp_path, monkeypatch):
    monkeypatch.delenv("PLAIT_DEV_ENV", raising=False)
    monkeypatch.chdir(tmp_path)
    path = write_dev_env({"PLAIT_API_URL": "http://127.0.0.1:1234", "PLAIT_REDIS_URL": "unix:///a b"})
    assert path == tmp_path / DEV_FILE
    out = subprocess.run(["bash", "-c", f"source {path} && echo \"$PLAIT_REDIS_URL\""],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "unix:///a b"
    dev = read_dev_env()
    assert dev.running and dev.values["PLAIT_API_URL"] == "http://127.0.0.1:1234"
    assert dev.values[PID_KEY] == str(os.getpid())


def test_found_from_a_subdirectory_and_env_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("PLAIT_DEV_ENV", raising=False)
    monkeypatch.chdir(tmp_path)
    write_dev_env({"PLAIT_API_URL": "http://dev"})
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "sub" / "deeper")
    monkeypatch.delenv("PLAIT_API_URL", raising=False)
    assert dev_value("PLAIT_API_URL") == "http://dev"
    monkeypatch.setenv("PLAIT_API_URL", "http://mine")
    assert dev_value("PLAIT_API_URL") == "http://mine"


def test_file_of_a_dead_plait_dev_is_stale(tmp_path, monkeypatch):
    monkeypatch.delenv("PLAIT_DEV_ENV", raising=False)
    monkeypatch.chdir(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".plait").mkdir()
    (tmp_path / DEV_FILE).write_text(f"export PLAIT_API_URL=http://x\nexport {PID_KEY}={dead.pid}\n")
    dev = read_dev_env()
    assert dev.stale and not dev.running and dev.values == {}


def test_remove_only_removes_own_file(tmp_path):
    path = write_dev_env({"PLAIT_API_URL": "http://x"}, tmp_path / "dev.env")
    other = tmp_path / "other.env"
    other.write_text(f"export {PID_KEY}=1\n")
    remove_dev_env(other)
    remove_dev_env(path)
    assert other.exists() and not path.exists()


def test_parse_skips_comments_and_unquotes():
    assert parse_dev_file("# c\n\nexport A='x y'\nB=2\n") == {"A": "x y", "B": "2"}
