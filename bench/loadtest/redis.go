package main

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

func memoryPerKey(ctx context.Context, c *redis.Client, match string, n int) (float64, int, error) {
	var keys []string
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) && len(keys) < n {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	if len(keys) == 0 {
		return 0, 0, errors.New("no token-bucket keys in Redis")
	}
	var sum int64
	for _, k := range keys {
		v, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			return 0, 0, err
		}
		sum += v
	}
	return float64(sum) / float64(len(keys)), len(keys), nil
}
