-- TPC-H Q1, pricing summary report, DP form: the groups are the public key sets of
-- l_returnflag and l_linestatus (all six are released, the two empty ones as noise).
SELECT
    l_returnflag,
    l_linestatus,
    SUM(l_quantity) AS sum_qty,
    SUM(l_extendedprice) AS sum_base_price,
    SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    -- In DOUBLE: a product of three DECIMAL(15, 2) columns can exceed DECIMAL's 38 digits,
    -- and dpml refuses private arithmetic that can fail on a row's value.
    SUM(CAST(l_extendedprice AS DOUBLE) * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    AVG(l_quantity) AS avg_qty,
    AVG(l_extendedprice) AS avg_price,
    AVG(l_discount) AS avg_disc,
    COUNT(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
