"""The encoder half: what turns text into vectors, for training, evaluation and export alike.

`bert_config` and `backbone` build the BERT encoder, `checkpoints` reads and writes its weights in
this project's format and loads Google TF1, HuggingFace and keras-hub ones through the one name
mapping of `weight_names`; `tokenization`, `vocabulary` and `cjk` cut text into word pieces;
`pooling` reduces token vectors, `packing` lays dialogue turns into model inputs; `sentence`
(`SentenceEncoder.encode`) and `dialogue` (`DialogueEncoder.encode_dialogues`) are the one
inference path per input kind.
"""
