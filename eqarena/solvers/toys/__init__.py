"""The paper's toy games (App. D rock-paper-scissors, App. E chicken), synthetic king tensors and their tables."""
