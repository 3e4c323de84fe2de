/**
 * Subject name strategies, as Confluent's serializers name them:
 *   topic-name   <topic>-value (TopicNameStrategy, the default): one schema history per topic,
 *                compatibility checked per topic.
 *   record-name  the message's fully-qualified name, e.g. outbox.v1.Envelope (RecordNameStrategy):
 *                one history for every topic that carries it.
 */
export type SubjectStrategy = 'topic-name' | 'record-name';

export function subjectFor(strategy: SubjectStrategy, topic: string, recordName: string): string {
  return strategy === 'record-name' ? recordName : `${topic}-value`;
}
