import { describe, expect, it } from 'vitest';
import { knownTopics, parseTopicOverride, topicSettingsFor } from './topic-settings.ts';

const base = {
  kafkaTopicPartitions: 6,
  kafkaTopicReplicationFactor: 3,
  kafkaTopicConfig: { 'retention.ms': '604800000', 'min.insync.replicas': '2' },
  kafkaTopicOverrides: { Invoice: 'partitions=12;cleanup.policy=compact', Audit: 'replication-factor=1' },
};

describe('topic settings', () => {
  it('parses an override: partitions, replication-factor, topic configs', () => {
    expect(
      parseTopicOverride('partitions=12;replication-factor=2;cleanup.policy=compact; retention.ms = 1'),
    ).toEqual({
      partitions: 12,
      replicationFactor: 2,
      config: { 'cleanup.policy': 'compact', 'retention.ms': '1' },
    });
    expect(parseTopicOverride('')).toEqual({});
  });

  it('names what is wrong in an override', () => {
    expect(() => parseTopicOverride('partitions=0')).toThrow(/partitions=0: must be a whole number from 1/);
    expect(() => parseTopicOverride('partitions=x')).toThrow(/whole number/);
    expect(() => parseTopicOverride('replicas=3')).toThrow(
      /"replicas" is neither partitions, replication-factor nor a topic config/,
    );
    expect(() => parseTopicOverride('partitions')).toThrow(/is not NAME=VALUE/);
  });

  it('merges an aggregate type’s override over the defaults', () => {
    expect(topicSettingsFor('Invoice', base)).toEqual({
      partitions: 12,
      replicationFactor: 3,
      config: { 'retention.ms': '604800000', 'min.insync.replicas': '2', 'cleanup.policy': 'compact' },
    });
    expect(topicSettingsFor('Audit', base).replicationFactor).toBe(1);
    expect(topicSettingsFor('Order', base)).toEqual({
      partitions: 6,
      replicationFactor: 3,
      config: base.kafkaTopicConfig,
    });
    expect(topicSettingsFor('toString', base).partitions).toBe(6); // own keys only
  });

  it('knows the topics of the aggregate types named in the configuration', () => {
    const route = {
      topicTemplate: 'outbox.event.{aggregate_type}',
      topicOverrides: { Customer: 'crm.customers', Payment: 'pay.{event_type}', Bad: 'no spaces' },
    };
    expect(knownTopics(route, base)).toEqual([
      { topic: 'crm.customers', aggregateType: 'Customer' },
      { topic: 'outbox.event.Invoice', aggregateType: 'Invoice' },
      { topic: 'outbox.event.Audit', aggregateType: 'Audit' },
    ]);
    // No aggregate type named anywhere: nothing known before events arrive.
    expect(
      knownTopics(
        { topicTemplate: 'outbox.event.{aggregate_type}', topicOverrides: {} },
        { ...base, kafkaTopicOverrides: {} },
      ),
    ).toEqual([]);
  });
});
