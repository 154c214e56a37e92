"""Games with missing cells: imputation, prompt groups as the prompt player's actions, the share of a rating
resting on imputed payoffs, and adaptive judging's choice of the next cells."""
