"""TFRecord types the data-prep stages write and the training stages read: one module per record
type (`mlm`, `contrastive`, `pairs`, `dialogues`) exporting its `record_type.RecordType` (spec,
settings, writer), the types by name (`registry`), and what they share: the spec base class and
`records_info.json` (`spec`), the hand-written protobuf encoder (`wire`), the shard writers
(`shards`), the reader (`reader`), the corpus source (`source`), streaming passes (`streaming`)
and the Apache Beam engine (`beam_pipeline`)."""
