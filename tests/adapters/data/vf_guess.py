"""A multi-turn verifiers env exposing ``load_environment(**kwargs)``, written with verifiers'
public classes for envaudit's tests (``Env.run`` drives the agent through ``interaction.turn``).

Guess a number in 1..``max_number`` (default 8); after each wrong guess the env answers "higher" or "lower".
The seat's ``max_turns`` (``turns``, default 4) ends the exchange (verifiers' stop condition ``max_turns``,
a truncation). Rewards: ``correct`` is 1 for the right guess, else 0, and nothing else pays: a
clean env by construction (no timeout or step payoff, no partial credit).
"""

import verifiers.v1 as vf
from verifiers.v1.utils.score import extract_boxed_answer


class GuessData(vf.TaskData):
    answer: str


class GuessTask(vf.Task[GuessData, vf.State, vf.TaskConfig]):
    pass


class GuessConfig(vf.TasksetConfig):
    max_number: int = 8


class GuessTaskset(vf.Taskset[GuessTask, GuessConfig]):
    def load(self):
        top = self.config.max_number
        for i in range(16):
            target = (5 * i + 3) % top + 1
            yield GuessTask(GuessData(
                prompt=f"Guess my number between 1 and {top}. Answer as \\boxed{{N}}.",
                answer=str(target)), self.config.task)


class GuessEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(max_turns=4)


class GuessEnv(vf.Env[GuessEnvConfig]):
    async def run(self, task, agents):
        won = False
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                guess = extract_boxed_answer(segment.last_reply, strict=True).strip()
                if guess == task.data.answer:
                    won = True
                    break
                hint = "higher" if guess.isdigit() and int(guess) < int(task.data.answer) else "lower"
                segment = await interaction.turn(f"Wrong: {hint}.")
        interaction.trace.record_reward("correct", 1.0 if won else 0.0)


def load_environment(max_number: int = 8, turns: int = 4):
    # verifiers' loader finds a taskset by module id; this file is imported under its own name.
    config = GuessEnvConfig(taskset=GuessConfig(id=__name__, max_number=max_number),
                            player=vf.AgentConfig(max_turns=turns))
    return GuessEnv(config)


__all__ = ["GuessConfig", "GuessData", "GuessEnv", "GuessTask", "GuessTaskset", "load_environment"]
