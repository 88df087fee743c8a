-- A histogram of o_orderpriority (public keys): orders per priority.
SELECT o_orderpriority, COUNT(*) AS orders
FROM orders
GROUP BY o_orderpriority
ORDER BY o_orderpriority
