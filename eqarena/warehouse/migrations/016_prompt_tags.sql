-- eqarena warehouse, migration 016: labels of a dataset's prompts beyond prompts.category / cluster,
-- read from battle logs (`eqarena import battles`): Chatbot Arena's `language`, `turn`, and each true
-- tag of its nested `category_tag` (e.g. 'if_v0.1/if', 'math_v0.1/math', 'criteria_v0.1/hard'). A prompt
-- may hold several tags of one grouping. `rate --prompt-groups language|turn|tag` makes each label one
-- action of the prompt player (docs/game.md#prompt-groups).

CREATE TABLE IF NOT EXISTS prompt_tags (
    dataset    VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    grouping   VARCHAR NOT NULL CHECK (grouping IN ('language', 'turn', 'tag')),
    tag        VARCHAR NOT NULL,
    PRIMARY KEY (dataset, prompt_id, grouping, tag)
);
